#!/usr/bin/env python3
"""Writes a graphrag-rs index's vectors into LanceDB tables laid out as
Microsoft GraphRAG 3.3 writes them, so that GraphRAG's Python API
(`graphrag.api.local_search`, `basic_search`, `drift_search`) runs on the
graphrag-rs output folder.

`graphrag-rs export lancedb --root DIR` runs this script (embedded in the
binary); `index` and `update` run it when settings.yaml says
`vector_store.type: lancedb`. It needs the `lancedb` pip package (which
brings pyarrow): `python3 -m pip install lancedb`.

One table per embedded field, named as GraphRAG names them
(`entity_description`, `community_full_content`, `text_unit_text`), with
GraphRAG's columns: `id` (string), `vector` (fixed-size list of float32),
`create_date` / `update_date` (ISO 8601 strings) and their exploded parts
(`create_date_year`, ..., `update_date_quarter`), which GraphRAG's vector
store adds for date filters. Each table is replaced as a whole.

Usage: export_lancedb.py --output OUTPUT_DIR --db-uri DB_URI FIELD[=TABLE[:ID_COLUMN:VECTOR_COLUMN]] ...
(GraphRAG's `vector_store.index_schema.<field>`: index_name, id_field, vector_field.)
Exit status 3 when lancedb (or pyarrow) cannot be imported.
"""

import argparse
import datetime as dt
import os
import sys

# The parts GraphRAG's vector store derives from each timestamp
# (graphrag_vectors.timestamp), in its column order, with their Arrow types.
DATE_PARTS = [
    ("year", "int"),
    ("month", "int"),
    ("month_name", "str"),
    ("day", "int"),
    ("day_of_week", "str"),
    ("hour", "int"),
    ("quarter", "int"),
]


def date_parts(when):
    """The exploded parts of a datetime, by suffix."""
    if when is None:
        return {name: None for name, _ in DATE_PARTS}
    return {
        "year": when.year,
        "month": when.month,
        "month_name": when.strftime("%B"),
        "day": when.day,
        "day_of_week": when.strftime("%A"),
        "hour": when.hour,
        "quarter": (when.month - 1) // 3 + 1,
    }


def build_table(pa, pq, path, id_column="id", vector_column="vector"):
    """The LanceDB table of one embeddings.<field>.parquet file."""
    source = pq.read_table(path)
    missing = [c for c in ("id", "vector") if c not in source.column_names]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}")
    ids = source.column("id").cast(pa.string())
    vectors = source.column("vector").combine_chunks()
    if not pa.types.is_fixed_size_list(vectors.type):
        raise ValueError(f"{path}: column vector is {vectors.type}, not a fixed-size list")
    dim = vectors.type.list_size
    values = vectors.flatten().cast(pa.float32())
    vector = pa.FixedSizeListArray.from_arrays(values, dim)
    rows = len(ids)
    # When the vectors were written: the file's modification time (GraphRAG
    # stamps the time of its own indexing run).
    created = dt.datetime.fromtimestamp(os.path.getmtime(path), tz=dt.timezone.utc).replace(microsecond=0)
    columns = {
        id_column: ids,
        vector_column: vector,
        "create_date": pa.array([created.isoformat()] * rows, type=pa.string()),
        "update_date": pa.array([None] * rows, type=pa.string()),
    }
    for prefix, when in (("create_date", created), ("update_date", None)):
        parts = date_parts(when)
        for name, kind in DATE_PARTS:
            arrow_type = pa.int64() if kind == "int" else pa.string()
            columns[f"{prefix}_{name}"] = pa.array([parts[name]] * rows, type=arrow_type)
    return pa.table(columns), dim


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="the index's output folder")
    parser.add_argument("--db-uri", required=True, help="the LanceDB folder (vector_store.db_uri)")
    parser.add_argument(
        "fields", nargs="+", help="FIELD[=TABLE[:ID_COLUMN:VECTOR_COLUMN]] (embeddings.FIELD.parquet → table)"
    )
    args = parser.parse_args()
    try:
        import lancedb
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        print(f"cannot import {e.name or 'lancedb'}: {e}", file=sys.stderr)
        sys.exit(3)

    db = lancedb.connect(args.db_uri)
    for spec in args.fields:
        field, _, target = spec.partition("=")
        table_name, id_column, vector_column = (target.split(":") + ["", "", ""])[:3]
        table_name = table_name or field
        path = os.path.join(args.output, f"embeddings.{field}.parquet")
        table, dim = build_table(pa, pq, path, id_column or "id", vector_column or "vector")
        db.create_table(table_name, data=table, mode="overwrite")
        print(f"{table_name}\t{table.num_rows}\t{dim}", flush=True)
    # Every table is committed. Leave without the interpreter's shutdown:
    # lancedb's background threads can abort it (SIGABRT in about one run
    # of four with lancedb 0.38), which would turn a finished export into a
    # failure.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
