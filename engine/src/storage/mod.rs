//! Where a project's input, output and cache live: local folders or a prefix
//! in a bucket (S3, Azure Blob, GCS).

pub mod counting;
pub mod remote;
