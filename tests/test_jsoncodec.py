"""JSON on the hot paths is orjson's (app.jsoncodec), read as leniently as the standard
library reads it: what a server writes that orjson alone would refuse still streams."""

from __future__ import annotations

import asyncio

from app import jsoncodec
from app.model.client import ModelClient
from tests.fakes.llm_server import FakeLLM, Reply

PAYLOAD = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def chunk(text: str, extra: str = "") -> str:
    delta = jsoncodec.dumps_text({"content": text})
    return f'data: {{"choices":[{{"index":0,"delta":{delta},"finish_reason":null}}]{extra}}}'


def test_a_server_writing_nan_and_infinity_still_streams_its_answer() -> None:
    """Python's json writes NaN and Infinity unless told not to (a server's logprobs, a
    score); they are not JSON, but the standard library reads them, and so do we."""
    wire = [
        chunk("Pierogi ", ',"logprobs":{"content":[{"logprob":-Infinity}]}'),
        chunk("boil 3 minutes.", ',"score":NaN'),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        "[DONE]",
    ]

    async def answer(llm: FakeLLM) -> str:
        client = ModelClient(llm.api_base)
        try:
            return "".join([e.text async for e in client.stream(PAYLOAD) if e.type == "delta"])
        finally:
            await client.aclose()

    with FakeLLM() as llm:
        llm.script(Reply(wire=lambda body: wire))
        assert asyncio.run(answer(llm)) == "Pierogi boil 3 minutes."


def test_written_json_is_compact_utf8_and_reads_back() -> None:
    """Stored and streamed JSON: non-ASCII as is (a Polish answer is not six bytes a
    letter), integer keys as strings as the standard library writes them."""
    value = {"text": "Zażółć gęślą jaźń 🥟", "kept": {3: "third"}, "n": [1, 2.5, None]}
    written = jsoncodec.dumps(value)
    assert (
        written == '{"text":"Zażółć gęślą jaźń 🥟","kept":{"3":"third"},"n":[1,2.5,null]}'.encode()
    )
    assert jsoncodec.loads(written) == {**value, "kept": {"3": "third"}}
    assert jsoncodec.loads(jsoncodec.dumps_text(value)) == jsoncodec.loads(written)
