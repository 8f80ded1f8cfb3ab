"""The official `openai` and `ollama` Python clients against `graphrag-rs serve`.

Run by server/tests/chat_api.rs against a server it started on loopback (its
models on the project's mock LLM):

    python3 sdk_clients.py answers  http://127.0.0.1:PORT   # a usable chat model
    python3 sdk_clients.py no-model http://127.0.0.1:PORT   # none configured

Prints "<mode>: ok" when every step passed; any failure raises.
"""

import sys

import ollama
import openai



def question(n: int) -> str:
    """A question no earlier call asked: a cached answer costs no tokens,
    and the token counts are checked."""
    return f"/naive Who is Fezziwig? (SDK session, question {n})"


def answers(base: str) -> None:
    oa = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)

    # Content as a list of parts, and an assistant turn with null content.
    r = oa.chat.completions.create(
        model="graphrag-rs:latest",
        messages=[
            {"role": "system", "content": [{"type": "text", "text": "Answer briefly."}]},
            {"role": "user", "content": "Who is Marley?"},
            {"role": "assistant", "content": None},
            {"role": "user", "content": [{"type": "text", "text": question(1)}]},
        ],
    )
    assert r.choices[0].message.content, r
    assert r.usage.total_tokens > 0, r.usage

    # An image part: refused, and the error says so.
    try:
        oa.chat.completions.create(
            model="graphrag-rs:latest",
            messages=[{"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
            ]}],
        )
        raise AssertionError("an image part was accepted")
    except openai.UnprocessableEntityError as e:
        assert "image_url" in e.body["message"], e.body

    # The model: listed and retrieved; another is not found.
    assert [m.id for m in oa.models.list()] == ["graphrag-rs:latest"]
    assert oa.models.retrieve("graphrag-rs:latest").id == "graphrag-rs:latest"
    try:
        oa.models.retrieve("gpt-4o")
        raise AssertionError("an unknown model was retrieved")
    except openai.NotFoundError as e:
        assert e.code == "model_not_found", e.body

    # A stream with the usage at its end.
    chunks = list(oa.chat.completions.create(
        model="graphrag-rs:latest",
        messages=[{"role": "user", "content": [{"type": "text", "text": question(2)}]}],
        stream=True,
        stream_options={"include_usage": True},
    ))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text, chunks
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1]

    ol = ollama.Client(host=base, timeout=60)
    assert [m.model for m in ol.list().models] == ["graphrag-rs:latest"]
    show = ol.show("graphrag-rs")
    assert show.details.family == "graphrag-rs" and "completion" in show.capabilities, show
    try:
        ol.show("llama3")
        raise AssertionError("an unknown model was shown")
    except ollama.ResponseError as e:
        assert e.status_code == 404 and "not found" in e.error, e

    r = ol.chat(model="graphrag-rs", messages=[
        {"role": "user", "content": "Who is Marley?"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": question(3)},
    ])
    assert r.message.content and r.done, r
    assert r.eval_count > 0 and r.prompt_eval_count > 0, r
    parts = list(ol.chat(model="graphrag-rs", messages=[{"role": "user", "content": question(4)}], stream=True))
    assert "".join(p.message.content for p in parts), parts
    assert parts[-1].done and parts[-1].eval_count > 0 and parts[-1].prompt_eval_count > 0, parts[-1]
    g = ol.generate(model="graphrag-rs", prompt=question(5))
    assert g.response and g.eval_count > 0, g


def no_model(base: str) -> None:
    """No usable chat model: both clients raise with the server's reason."""
    oa = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
    for stream in (False, True):
        try:
            oa.chat.completions.create(
                model="graphrag-rs:latest",
                messages=[{"role": "user", "content": [{"type": "text", "text": "Who is Fezziwig?"}]}],
                stream=stream,
            )
            raise AssertionError("answered without a chat model")
        except openai.InternalServerError as e:
            assert e.status_code == 503 and "no api_key and no api_base" in e.body["message"], e.body

    ol = ollama.Client(host=base, timeout=60)
    try:
        ol.chat(model="graphrag-rs", messages=[{"role": "user", "content": "Who is Fezziwig?"}])
        raise AssertionError("answered without a chat model")
    except ollama.ResponseError as e:
        assert e.status_code == 503 and "only_need_context" in e.error, e
    # The context, asked for by its prefix, is served.
    r = ol.chat(model="graphrag-rs", messages=[{"role": "user", "content": "/basiccontext Who is Fezziwig?"}])
    assert "Fezziwig" in r.message.content, r


if __name__ == "__main__":
    mode, base = sys.argv[1], sys.argv[2]
    {"answers": answers, "no-model": no_model}[mode](base)
    print(f"{mode}: ok")
