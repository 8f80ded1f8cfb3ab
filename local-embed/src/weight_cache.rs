//! The dense layers as a precision prepares them (int8 quantized and
//! packed, bf16 rounded and packed, f32 transposed), kept in a file so that
//! the next process maps them instead of reading the f32 weights and
//! converting them again: quantizing at every start was about a third of a
//! cold query's CPU, reading the weights another quarter.
//!
//! One file per model file and precision, in a per-user cache folder (the
//! model's own folder is often a read-only package folder), named by the
//! model file's path; inside it, the identity of the model's bytes and of
//! this format, which a load compares, so a replaced model or a newer
//! format rebuilds the file instead of using it. A checksum of the contents
//! catches a damaged file (a crash before the data reached the disk, a
//! truncation). Files are written whole under a temporary name and renamed
//! into place, so a reader sees the old file or the new one, never a part:
//! two processes preparing at once both rename a complete file, the last
//! one wins. A process that maps a file keeps its inode when another
//! replaces it.
//!
//! Layout (little-endian): a 64-byte header (magic, format version, number
//! of arrays, identity, file length, CRC-32 of everything after the header),
//! one 24-byte entry per array (element type, byte offset, element count),
//! then the arrays, each at a 64-byte boundary.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use memmap2::{Mmap, MmapOptions};
use sha2::{Digest, Sha256};

use crate::buf::{Buf, Plain};

/// Bump when the prepared bytes of any precision change (quantization,
/// rounding, packing, array order): files of another version are rebuilt.
const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"GRLEWTS\0";
const HEADER: usize = 64;
const ENTRY: usize = 24;
const ALIGN: usize = 64;

/// The environment variable naming the cache folder (`off`: keep none).
pub const ENV_VAR: &str = "GRAPHRAG_MODEL_CACHE_DIR";

/// Element types of the arrays, as stored in the entries.
pub(crate) trait Element: Plain {
    const TAG: u8;
}

impl Element for f32 {
    const TAG: u8 = 1;
}
impl Element for i8 {
    const TAG: u8 = 2;
}
impl Element for u16 {
    const TAG: u8 = 3;
}

/// The default folder: `$GRAPHRAG_MODEL_CACHE_DIR` (`off` for none), else
/// `graphrag-rs/local-embed` under `$XDG_CACHE_HOME`, `%LOCALAPPDATA%` or
/// `~/.cache`.
pub fn default_dir() -> Option<PathBuf> {
    dir_from(|v| std::env::var_os(v))
}

/// `default_dir` with the environment read through `var`.
fn dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let env = |v: &str| var(v).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = env(ENV_VAR) {
        return (dir != Path::new("off")).then_some(dir);
    }
    let root =
        env("XDG_CACHE_HOME").or_else(|| env("LOCALAPPDATA")).or_else(|| env("HOME").map(|h| h.join(".cache")))?;
    Some(root.join("graphrag-rs").join("local-embed"))
}

/// Where one model's prepared weights for one precision are kept, and the
/// identity the file must carry to be used.
pub(crate) struct Slot {
    pub(crate) path: PathBuf,
    identity: [u8; 32],
}

impl Slot {
    /// The slot in `dir` for the model file at `model_path` (opened as
    /// `file`) prepared as `layout` (the precision's name). `sample` feeds
    /// the identity what the model's bytes are known by (see
    /// `Tensors::fingerprint`): hashing all 90 MB would cost more than the
    /// conversion the file saves.
    pub(crate) fn new(
        dir: &Path,
        model_path: &Path,
        file: &File,
        layout: &str,
        sample: impl FnOnce(&mut Sha256),
    ) -> Slot {
        let where_ = model_path.canonicalize().unwrap_or_else(|_| model_path.to_path_buf());
        let name = Sha256::digest(where_.as_os_str().as_encoded_bytes());
        let path = dir.join(format!("{layout}-{}.weights", hex(&name[..8])));

        let mut h = Sha256::new();
        h.update(b"graphrag-local-embed prepared weights\0");
        h.update(FORMAT_VERSION.to_le_bytes());
        h.update(layout.as_bytes());
        h.update([0]);
        // Length and modification time: a model file written again (a
        // fine-tune saved over it, a reinstall) has a new time even when the
        // samples happen to agree.
        let meta = file.metadata().ok();
        h.update(meta.as_ref().map_or(0, |m| m.len()).to_le_bytes());
        let mtime = meta.and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        h.update(mtime.map_or(0, |d| d.as_nanos()).to_le_bytes());
        sample(&mut h);
        Slot { path, identity: h.finalize().into() }
    }

    /// The file's arrays, or `Ok(None)` when there is no file; an error when
    /// it is there but stale (another model or format) or damaged.
    pub(crate) fn open(&self) -> Result<Option<Reader>> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("opening {}", self.path.display())),
        };
        // SAFETY: cache files are only ever replaced by rename, never written
        // in place, so the mapped inode does not change under us. Populated:
        // the checksum and the forward pass read every page anyway, and one
        // call faults them in at a fraction of the cost of one fault each.
        let map = unsafe { MmapOptions::new().populate().map(&file) }
            .with_context(|| format!("mapping {}", self.path.display()))?;
        let map = Arc::new(map);
        let entries = self.check(&map).with_context(|| format!("{} is not usable", self.path.display()))?;
        Ok(Some(Reader { map, entries, next: 0 }))
    }

    /// The header and entries of `bytes`, after checking the magic, version,
    /// identity, length, checksum and that every array lies in the file.
    fn check(&self, bytes: &[u8]) -> Result<Vec<Entry>> {
        ensure!(bytes.starts_with(MAGIC), "not a weights file");
        ensure!(bytes.len() >= HEADER, "truncated: {} bytes", bytes.len());
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        ensure!(u32_at(8) == FORMAT_VERSION, "format version {} (this build writes {FORMAT_VERSION})", u32_at(8));
        ensure!(bytes[16..48] == self.identity, "prepared from another model file or format");
        ensure!(u64_at(48) == bytes.len() as u64, "truncated: {} bytes of {}", bytes.len(), u64_at(48));
        ensure!(u64::from(crc32fast::hash(&bytes[HEADER..])) == u64_at(56), "checksum mismatch");
        let count = u32_at(12) as usize;
        let table_end = count.checked_mul(ENTRY).and_then(|t| t.checked_add(HEADER)).context("entry count")?;
        ensure!(table_end <= bytes.len(), "entry table past the end");
        let mut entries = Vec::with_capacity(count);
        for e in bytes[HEADER..table_end].chunks_exact(ENTRY) {
            let offset = usize::try_from(u64::from_le_bytes(e[8..16].try_into().expect("8 bytes")))?;
            let len = usize::try_from(u64::from_le_bytes(e[16..24].try_into().expect("8 bytes")))?;
            entries.push(Entry { tag: e[0], offset, len });
        }
        Ok(entries)
    }

    /// Writes `arrays` as this slot's file: to a temporary file in the same
    /// folder, then renamed over the slot, so that no reader sees a part.
    pub(crate) fn store(&self, arrays: &Arrays) -> Result<()> {
        let dir = self.path.parent().context("cache file without a folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (table, total) = arrays.layout();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&table);
        let mut at = HEADER + table.len();
        for (bytes, offset) in arrays.0.iter().map(|a| a.1).zip(arrays.offsets()) {
            crc.update(&ZEROS[..offset - at]);
            crc.update(bytes);
            at = offset + bytes.len();
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(arrays.0.len() as u32).to_le_bytes());
        header[16..48].copy_from_slice(&self.identity);
        header[48..56].copy_from_slice(&(total as u64).to_le_bytes());
        header[56..64].copy_from_slice(&u64::from(crc.finalize()).to_le_bytes());

        let tmp = temp_name(&self.path);
        let written = (|| -> Result<()> {
            let mut f = std::io::BufWriter::new(File::create_new(&tmp)?);
            f.write_all(&header)?;
            f.write_all(&table)?;
            let mut at = HEADER + table.len();
            for (bytes, offset) in arrays.0.iter().map(|a| a.1).zip(arrays.offsets()) {
                f.write_all(&ZEROS[..offset - at])?;
                f.write_all(bytes)?;
                at = offset + bytes.len();
            }
            // No fsync: after a crash the file may hold zeros or be short,
            // which the length and checksum reject; it is then rebuilt.
            f.into_inner().map_err(|e| e.into_error())?;
            std::fs::rename(&tmp, &self.path)?;
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.with_context(|| format!("writing {}", self.path.display()))
    }
}

/// Padding between arrays (less than one alignment step).
static ZEROS: [u8; ALIGN] = [0; ALIGN];

/// A name beside `path` that no other process or thread uses at once.
fn temp_name(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    PathBuf::from(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The arrays to store, in the order they are read back.
#[derive(Default)]
pub(crate) struct Arrays<'a>(Vec<(u8, &'a [u8], usize)>);

impl<'a> Arrays<'a> {
    pub(crate) fn push<T: Element>(&mut self, b: &'a Buf<T>) {
        self.0.push((T::TAG, b.as_bytes(), b.len()));
    }

    /// Each array's byte offset in the file.
    fn offsets(&self) -> impl Iterator<Item = usize> + '_ {
        let mut at = HEADER + self.0.len() * ENTRY;
        self.0.iter().map(move |a| {
            let offset = at.next_multiple_of(ALIGN);
            at = offset + a.1.len();
            offset
        })
    }

    /// The entry table and the file's total length.
    fn layout(&self) -> (Vec<u8>, usize) {
        let mut table = Vec::with_capacity(self.0.len() * ENTRY);
        let mut end = HEADER + self.0.len() * ENTRY;
        for (&(tag, bytes, len), offset) in self.0.iter().zip(self.offsets()) {
            table.push(tag);
            table.extend_from_slice(&[0; 7]);
            table.extend_from_slice(&(offset as u64).to_le_bytes());
            table.extend_from_slice(&(len as u64).to_le_bytes());
            end = offset + bytes.len();
        }
        (table, end)
    }
}

struct Entry {
    tag: u8,
    offset: usize,
    len: usize,
}

/// The arrays of a checked file, taken in the order they were stored.
pub(crate) struct Reader {
    map: Arc<Mmap>,
    entries: Vec<Entry>,
    next: usize,
}

impl Reader {
    /// The next array, which must hold `len` elements of `T`.
    pub(crate) fn take<T: Element>(&mut self, len: usize) -> Result<Buf<T>> {
        let e = self.entries.get(self.next).context("fewer arrays than the model has")?;
        self.next += 1;
        if e.tag != T::TAG || e.len != len {
            bail!("array {} is not the {len} elements expected", self.next - 1);
        }
        Buf::mapped(&self.map, e.offset, e.len)
            .with_context(|| format!("array {} lies outside the file", self.next - 1))
    }

    /// Checks that every array was taken.
    pub(crate) fn finish(self) -> Result<()> {
        ensure!(self.next == self.entries.len(), "more arrays than the model has");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bf16Kernel, Int8Kernel, Kernel, LocalEmbedder, PreparedWeights};

    /// Deterministic pseudo-random numbers in (-0.5, 0.5), from `seed`.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    const WORDS: [&str; 12] = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "##s", "##ed", "."];

    /// A tiny BERT model folder (2 layers, width 32, 4 heads) with weights
    /// drawn from `seed`: the same shapes and file layout for every seed.
    fn tiny_model(dir: &Path, seed: u64) {
        let (h, inter, layers, vocab, positions) = (32usize, 64usize, 2usize, 5 + WORDS.len(), 32usize);
        std::fs::create_dir_all(dir).unwrap();
        let config = serde_json::json!({
            "model_type": "bert", "vocab_size": vocab, "hidden_size": h, "num_hidden_layers": layers,
            "num_attention_heads": 4, "intermediate_size": inter, "max_position_embeddings": positions,
            "hidden_act": "gelu", "layer_norm_eps": 1e-12,
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let mut tokens = vec!["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
        tokens.extend(WORDS);
        std::fs::write(dir.join("vocab.txt"), tokens.join("\n")).unwrap();

        let mut shapes: Vec<(String, Vec<usize>)> = vec![
            ("embeddings.word_embeddings.weight".into(), vec![vocab, h]),
            ("embeddings.position_embeddings.weight".into(), vec![positions, h]),
            ("embeddings.token_type_embeddings.weight".into(), vec![2, h]),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for i in 0..layers {
            let p = format!("encoder.layer.{i}");
            for (name, n_in, n_out) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", h, inter),
                ("output.dense", inter, h),
            ] {
                shapes.push((format!("{p}.{name}.weight"), vec![n_out, n_in]));
                shapes.push((format!("{p}.{name}.bias"), vec![n_out]));
            }
            for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
                shapes.push((format!("{p}.{ln}.weight"), vec![h]));
                shapes.push((format!("{p}.{ln}.bias"), vec![h]));
            }
        }
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (i, (name, shape)) in shapes.iter().enumerate() {
            let n: usize = shape.iter().product();
            let mut v = values(n, seed * 1000 + i as u64);
            if name.contains("LayerNorm.weight") {
                v.iter_mut().for_each(|x| *x += 1.0);
            }
            let start = data.len();
            data.extend(v.iter().flat_map(|x| x.to_le_bytes()));
            header.insert(
                name.clone(),
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
            );
        }
        // Padded as the safetensors writers do, so the data is 8-byte aligned.
        let mut header = serde_json::to_vec(&header).unwrap();
        header.resize(header.len().next_multiple_of(8), b' ');
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(&header);
        file.extend_from_slice(&data);
        std::fs::write(dir.join("model.safetensors"), file).unwrap();
    }

    const TEXTS: [&str; 3] = ["the cat sat on a mat.", "dogs ran far", "a cat, a dog and a mat"];

    fn embed(e: &LocalEmbedder) -> Vec<Vec<u32>> {
        let vectors = e.embed(&TEXTS).unwrap();
        vectors.iter().map(|v| v.iter().map(|x| x.to_bits()).collect()).collect()
    }

    fn kernels() -> Vec<Kernel> {
        let mut out = vec![Kernel::F32];
        out.extend(Int8Kernel::available().into_iter().map(Kernel::Int8));
        out.extend(Bf16Kernel::available().into_iter().map(Kernel::Bf16));
        out
    }

    #[test]
    fn cached_weights_give_the_same_bits() {
        let tmp = tempfile::tempdir().unwrap();
        let (model, cache) = (tmp.path().join("model"), tmp.path().join("cache"));
        tiny_model(&model, 1);
        for kernel in kernels() {
            let fresh = LocalEmbedder::load_cached(&model, kernel, None).unwrap();
            assert_eq!(fresh.prepared_weights(), &PreparedWeights::NotKept(None));
            let want = embed(&fresh);
            // The first kernel path of a precision stores, the others (the
            // same bytes) map what it stored.
            let first = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
            let path = match first.prepared_weights() {
                PreparedWeights::Stored { path, replaced: None } | PreparedWeights::Mapped(path) => path.clone(),
                other => panic!("{}: {other:?}", kernel.name()),
            };
            assert_eq!(embed(&first), want, "{} as stored", kernel.name());
            let mapped = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
            assert_eq!(mapped.prepared_weights(), &PreparedWeights::Mapped(path), "{}", kernel.name());
            assert_eq!(embed(&mapped), want, "{} mapped", kernel.name());
        }
        // One file per precision, no temporary files left.
        let mut names: Vec<String> =
            std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        for (name, precision) in names.iter().zip(["bf16-", "f32-", "int8-"]) {
            assert!(name.starts_with(precision) && name.ends_with(".weights"), "{names:?}");
        }
    }

    #[test]
    fn the_file_is_reused_and_the_tables_are_mapped() {
        let tmp = tempfile::tempdir().unwrap();
        let (model, cache) = (tmp.path().join("model"), tmp.path().join("cache"));
        tiny_model(&model, 2);
        let kernel = Kernel::Int8(Int8Kernel::best());
        let first = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
        let PreparedWeights::Stored { path, replaced: None } = first.prepared_weights().clone() else {
            panic!("{:?}", first.prepared_weights())
        };
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        for _ in 0..2 {
            let again = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
            assert_eq!(again.prepared_weights(), &PreparedWeights::Mapped(path.clone()));
            assert!(again.model.word_table_is_mapped());
        }
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), written, "not rewritten");
    }

    /// Loads with the cache, expecting the file to be rebuilt for `why`,
    /// then to be mapped, with the vectors of a load without cache.
    fn expect_rebuilt(model: &Path, cache: &Path, why: &str) {
        let kernel = Kernel::Int8(Int8Kernel::best());
        let want = embed(&LocalEmbedder::load_cached(model, kernel, None).unwrap());
        let rebuilt = LocalEmbedder::load_cached(model, kernel, Some(cache)).unwrap();
        match rebuilt.prepared_weights() {
            PreparedWeights::Stored { replaced: Some(reason), .. } if reason.contains(why) => {}
            other => panic!("expected a rebuild for {why:?}, got {other:?}"),
        }
        assert_eq!(embed(&rebuilt), want);
        let mapped = LocalEmbedder::load_cached(model, kernel, Some(cache)).unwrap();
        assert!(matches!(mapped.prepared_weights(), PreparedWeights::Mapped(_)), "{:?}", mapped.prepared_weights());
        assert_eq!(embed(&mapped), want);
    }

    #[test]
    fn a_damaged_or_stale_file_is_rebuilt() {
        let tmp = tempfile::tempdir().unwrap();
        let (model, cache) = (tmp.path().join("model"), tmp.path().join("cache"));
        tiny_model(&model, 3);
        let kernel = Kernel::Int8(Int8Kernel::best());
        let PreparedWeights::Stored { path, .. } =
            LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap().prepared_weights().clone()
        else {
            panic!("not stored")
        };
        let good = std::fs::read(&path).unwrap();

        std::fs::write(&path, &good[..good.len() - 100]).unwrap();
        expect_rebuilt(&model, &cache, "truncated");
        std::fs::write(&path, &good[..40]).unwrap();
        expect_rebuilt(&model, &cache, "truncated");
        std::fs::write(&path, b"").unwrap();
        expect_rebuilt(&model, &cache, "not a weights file");
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 0x10;
        std::fs::write(&path, &flipped).unwrap();
        expect_rebuilt(&model, &cache, "checksum");
        let mut other_version = good.clone();
        other_version[8] = other_version[8].wrapping_add(1);
        std::fs::write(&path, &other_version).unwrap();
        expect_rebuilt(&model, &cache, "format version");
        // Another model's weights under the same path: stale.
        tiny_model(&model, 4);
        expect_rebuilt(&model, &cache, "another model");
    }

    #[test]
    fn racing_writers_leave_a_valid_file() {
        let tmp = tempfile::tempdir().unwrap();
        let (model, cache) = (tmp.path().join("model"), tmp.path().join("cache"));
        tiny_model(&model, 5);
        let kernel = Kernel::Int8(Int8Kernel::best());
        let want = embed(&LocalEmbedder::load_cached(&model, kernel, None).unwrap());
        let done = std::sync::atomic::AtomicBool::new(false);
        let barrier = std::sync::Barrier::new(5);
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        for _ in 0..5 {
                            // Each load finds the file (valid) or not yet,
                            // and stores it when not: never a part of one.
                            let e = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
                            match e.prepared_weights() {
                                PreparedWeights::Mapped(_) | PreparedWeights::Stored { replaced: None, .. } => {}
                                other => panic!("{other:?}"),
                            }
                            assert_eq!(embed(&e), want);
                        }
                    })
                })
                .collect();
            // Meanwhile: every file a reader finds under the name is whole.
            s.spawn(|| {
                barrier.wait();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let e = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
                    if let PreparedWeights::Stored { replaced: Some(why), .. } = e.prepared_weights() {
                        panic!("a reader found a bad file: {why}");
                    }
                }
            });
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let names: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "one file, no temporary ones: {names:?}");
        let e = LocalEmbedder::load_cached(&model, kernel, Some(&cache)).unwrap();
        assert!(matches!(e.prepared_weights(), PreparedWeights::Mapped(_)));
        assert_eq!(embed(&e), want);
    }

    #[test]
    fn an_unwritable_folder_costs_only_the_preparation() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model");
        tiny_model(&model, 6);
        // A file where the folder should be: creating the folder fails (a
        // read-only folder would not stop root, who runs CI).
        let blocked = tmp.path().join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let kernel = Kernel::Int8(Int8Kernel::best());
        let e = LocalEmbedder::load_cached(&model, kernel, Some(&blocked.join("cache"))).unwrap();
        assert!(matches!(e.prepared_weights(), PreparedWeights::NotKept(Some(_))), "{:?}", e.prepared_weights());
        assert_eq!(embed(&e), embed(&LocalEmbedder::load_cached(&model, kernel, None).unwrap()));
    }

    #[test]
    fn default_folder() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| std::ffi::OsString::from(v))
        };
        assert_eq!(dir_from(env(&[(ENV_VAR, "/c"), ("HOME", "/h")])), Some(PathBuf::from("/c")));
        assert_eq!(dir_from(env(&[(ENV_VAR, "off"), ("HOME", "/h")])), None);
        let under = |root: &str| Some(Path::new(root).join("graphrag-rs").join("local-embed"));
        assert_eq!(dir_from(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])), under("/x"));
        assert_eq!(dir_from(env(&[(ENV_VAR, ""), ("HOME", "/h")])), under("/h/.cache"));
        assert_eq!(dir_from(env(&[])), None);
    }
}
