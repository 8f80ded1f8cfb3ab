#!/usr/bin/env python3
"""Runs Microsoft GraphRAG 3.3's own code on a graphrag-rs output folder.

    python graphrag_api_check.py reports OUTPUT_DIR LEVEL...
        The community reports GraphRAG's query API selects at each level
        (graphrag.query.indexer_adapters.read_indexer_reports, as
        graphrag.api.global_search calls it): count and ids, one JSON line
        per level. Compare with
        `graphrag-rs query --method global --context-only --json --community-level N`.

    python graphrag_api_check.py relationships OUTPUT_DIR MAX_TOKENS CONTEXT_JSON
        GraphRAG's local search Relationships table against graphrag-rs's:
        CONTEXT_JSON is `graphrag-rs query --method local --context-only
        --json` on OUTPUT_DIR's project; GraphRAG's table is built for the
        entities of its Entities table, in that order
        (LocalSearchMixedContext._build_local_context, with the parameters
        graphrag.api.local_search gives it, under MAX_TOKENS: the local share
        of max_context_tokens, 4200 of the default 12000). Prints both and
        exits non-zero if they differ.

    python graphrag_api_check.py api GRAPHRAG_ROOT QUESTION
        graphrag.api.global_search, local_search, basic_search and
        drift_search on the folder that GRAPHRAG_ROOT/settings.yaml names
        (output_storage.base_dir, vector_store.db_uri: a graphrag-rs output
        folder with its LanceDB tables from `graphrag-rs export lancedb`).
        Prints each method's answer length and context sizes; exits non-zero
        if one fails.

Needs the `graphrag` pip package (3.3.0). Offline: tiktoken's encodings come
from the copy litellm bundles. How it was used: docs/benchmarks.md,
"GraphRAG 3.3 compatibility".
"""

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path


def offline_tokenizers():
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        tokenizers = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tokenizers))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def reports(output_dir, levels):
    import pandas as pd
    from graphrag.query.indexer_adapters import read_indexer_reports

    out = Path(output_dir)
    community_reports = pd.read_parquet(out / "community_reports.parquet")
    communities = pd.read_parquet(out / "communities.parquet")
    for level in levels:
        selected = read_indexer_reports(community_reports, communities, int(level))
        ids = sorted(int(r.short_id) for r in selected)
        print(json.dumps({"level": int(level), "reports": len(ids), "ids": ids}))


def relationships(output_dir, max_tokens, context_json):
    import pandas as pd
    from graphrag.query.indexer_adapters import read_indexer_entities, read_indexer_relationships
    from graphrag.query.structured_search.local_search.mixed_context import LocalSearchMixedContext
    from graphrag.tokenizer.get_tokenizer import get_tokenizer

    ours = json.loads(Path(context_json).read_text())
    titles = [row["entity"] for row in ours["context_records"]["entities"]]
    out = Path(output_dir)
    entities = read_indexer_entities(
        pd.read_parquet(out / "entities.parquet"), pd.read_parquet(out / "communities.parquet"), None
    )
    by_title = {e.title: e for e in entities}
    builder = LocalSearchMixedContext(
        entities=entities,
        entity_text_embeddings=None,  # not read by the table building below
        text_embedder=None,
        relationships=read_indexer_relationships(pd.read_parquet(out / "relationships.parquet")),
        tokenizer=get_tokenizer(encoding_model="o200k_base"),
    )
    text, _ = builder._build_local_context(
        selected_entities=[by_title[t] for t in titles],
        max_context_tokens=int(max_tokens),
        include_entity_rank=True,
        rank_description="number of relationships",
        include_relationship_weight=True,
        top_k_relationships=10,
    )
    table = lambda context: context.split("-----Relationships-----\n")[1].split("\n\n")[0].strip("\n")
    theirs, mine = table(text), table(ours["context"])
    print(f"{len(titles)} entities; GraphRAG 3.3:\n{theirs}\n\ngraphrag-rs:\n{mine}")
    print("identical" if theirs == mine else "DIFFERENT")
    return [] if theirs == mine else ["relationships"]


async def api(root, question):
    import pandas as pd
    import graphrag.api as graphrag_api
    from graphrag.config.load_config import load_config

    config = load_config(Path(root).resolve())
    out = Path(config.output_storage.base_dir)
    table = lambda name: pd.read_parquet(out / f"{name}.parquet")
    entities, communities, reports_df = table("entities"), table("communities"), table("community_reports")
    text_units, relationships = table("text_units"), table("relationships")
    covariates = table("covariates") if (out / "covariates.parquet").exists() else None
    level, response_type = 2, "Multiple Paragraphs"
    runs = {
        "global": lambda: graphrag_api.global_search(
            config=config, entities=entities, communities=communities, community_reports=reports_df,
            community_level=level, dynamic_community_selection=False, response_type=response_type, query=question,
        ),
        "local": lambda: graphrag_api.local_search(
            config=config, entities=entities, communities=communities, community_reports=reports_df,
            text_units=text_units, relationships=relationships, covariates=covariates, community_level=level,
            response_type=response_type, query=question,
        ),
        "basic": lambda: graphrag_api.basic_search(
            config=config, text_units=text_units, response_type=response_type, query=question,
        ),
        "drift": lambda: graphrag_api.drift_search(
            config=config, entities=entities, communities=communities, community_reports=reports_df,
            text_units=text_units, relationships=relationships, community_level=level,
            response_type=response_type, query=question,
        ),
    }
    failed = []
    for name, run in runs.items():
        try:
            response, context = await run()
            sizes = {k: len(v) for k, v in context.items()} if isinstance(context, dict) else type(context).__name__
            ok = isinstance(response, str) and response.strip() != ""
            line = {"method": name, "ok": ok, "answer_chars": len(str(response)), "context": sizes}
            if isinstance(context, dict) and "relationships" in context:
                line["relationship_columns"] = list(context["relationships"].columns)
            print(json.dumps(line))
            if not ok:
                failed.append(name)
        except Exception as e:  # noqa: BLE001 - report every method
            print(json.dumps({"method": name, "ok": False, "error": f"{type(e).__name__}: {e}"}))
            failed.append(name)
    return failed


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("reports", "relationships", "api"):
        sys.exit(__doc__)
    offline_tokenizers()
    if sys.argv[1] == "reports":
        reports(sys.argv[2], sys.argv[3:] or ["2"])
        failed = []
    elif sys.argv[1] == "relationships":
        failed = relationships(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        failed = asyncio.run(api(sys.argv[2], " ".join(sys.argv[3:]) or "What are the main themes?"))
    # lancedb's threads can abort the interpreter's shutdown (see export_lancedb.py).
    sys.stdout.flush()
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main()
