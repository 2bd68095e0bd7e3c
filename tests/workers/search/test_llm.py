"""The llm generator against a local fake OpenAI-compatible server started in the test."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workers.search.engine import campaign_new, run_campaign
from workers.search.generators.base import GenerationContext
from workers.search.generators.llm import LLMGenerator

GOOD = """Here you go:
```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
    def forward(self, x):
        return x  # VERSION
```
"""


class FakeAPI:
    """Answers /v1/chat/completions from a script of (status, body or callable, delay)."""

    def __init__(self):
        self.script = []
        self.requests = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                status, content, delay = api.script.pop(0) if api.script else (200, GOOD, 0)
                time.sleep(delay)
                if status == 429:
                    self.send_response(429)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                payload = (
                    content
                    if isinstance(content, bytes)
                    else json.dumps(
                        {
                            "choices": [{"message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                        }
                    ).encode()
                )
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except BrokenPipeError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def api():
    fake = FakeAPI()
    yield fake
    fake.close()


def _gen(api, **kw):
    return LLMGenerator(
        api.url,
        "fake-model",
        "secret",
        timeout_s=kw.pop("timeout_s", 2.0),
        max_retries=kw.pop("max_retries", 2),
        **kw,
    )


def test_good_answer_becomes_a_seed(api, softmax_source):
    gen = _gen(api)
    props = gen.propose(GenerationContext(problem_source=softmax_source), 1)
    assert len(props) == 1 and props[0].edge == "seed"
    assert "class ModelNew" in props[0].source and "Here you go" not in props[0].source
    req = api.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer secret"
    assert req["body"]["model"] == "fake-model"
    assert "torch.softmax" in req["body"]["messages"][1]["content"]
    assert gen.stats()["answers"] == 1 and gen.stats()["tokens_in"] == 10


def test_malformed_answers_are_counted_not_raised(api, softmax_source):
    api.script = [
        (200, "no code at all", 0),
        (200, GOOD + GOOD, 0),
        (200, b"not json", 0),
        (500, "oops", 0),
    ]
    gen = _gen(api)
    assert gen.propose(GenerationContext(problem_source=softmax_source), 4) == []
    s = gen.stats()
    assert s["malformed"] == 3 and s["http_errors"] == 1 and s["answers"] == 0


def test_timeout_is_counted(api, softmax_source):
    api.script = [(200, GOOD, 1.5)]
    gen = _gen(api, timeout_s=0.3)
    assert gen.propose(GenerationContext(problem_source=softmax_source), 1) == []
    assert gen.stats()["timeouts"] == 1


def test_rate_limit_is_retried_then_counted(api, softmax_source):
    api.script = [(429, "", 0), (200, GOOD, 0)]
    gen = _gen(api)
    assert len(gen.propose(GenerationContext(problem_source=softmax_source), 1)) == 1
    assert gen.stats()["rate_limited"] == 1
    api.script = [(429, "", 0)] * 3
    assert gen.propose(GenerationContext(problem_source=softmax_source), 1) == []
    assert gen.stats()["rate_limited"] == 4


def test_failed_compile_leads_to_a_repair_round_with_the_evidence(
    api, softmax_source, fake_evaluator, fake_report, monkeypatch
):
    """First answer fails the compile gate; the next prompt carries its evidence."""
    monkeypatch.setenv("KERNELEVOLVE_LLM_URL", api.url)
    monkeypatch.setenv("KERNELEVOLVE_LLM_MODEL", "fake-model")
    api.script = [(200, GOOD.replace("VERSION", "v1"), 0), (200, GOOD.replace("VERSION", "v2"), 0)]

    def evaluate(req):
        if "v1" in req.candidate_source:
            return fake_report("rejected", "compile", "compile: CompilationError at 3:11")
        return fake_report(fitness=None, device_s=0.0)

    ev = fake_evaluator(lambda p: 1.0)
    ev.evaluate = evaluate
    state = campaign_new(
        problem_source=softmax_source,
        platform="interpret",
        generators=["llm"],
        max_candidates=2,
        seeds=1,
        saturation_rounds=5,
    )
    run_campaign(state, evaluator=ev)
    nodes = state["graph"]["nodes"]
    assert [n["edge"] for n in nodes] == ["seed", "repair"]
    assert nodes[1]["parent_ids"] == [nodes[0]["id"]]
    prompt = api.requests[1]["body"]["messages"][1]["content"]
    assert "failed the compile gate" in prompt and "evidence for compile" in prompt
    assert "v1" in prompt  # the parent's source
    assert state["generator_stats"]["llm"]["answers"] == 2
    assert state["outcome"] == "no_safe_improvement"
