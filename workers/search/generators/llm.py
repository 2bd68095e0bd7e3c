"""The LLM generator: any OpenAI-compatible chat-completions endpoint, no SDK.

Configured by ``KERNELEVOLVE_LLM_URL`` (the base URL, e.g. ``http://localhost:8000/v1``; the
``/chat/completions`` path is appended unless present), ``KERNELEVOLVE_LLM_MODEL`` and
``KERNELEVOLVE_LLM_API_KEY`` (optional, sent as a bearer token). The prompt holds the problem,
the parent's source, the failing gate's evidence (so the child is a ``repair``) and retrieved
knowledge entries. The answer must contain exactly one fenced code block; anything else is a
malformed answer. Timeouts, rate limits (HTTP 429, retried after ``Retry-After`` up to
``max_retries`` times), HTTP errors and malformed answers are counted in :meth:`stats` and never
raise out of :meth:`propose`.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request

from workers.search.generators.base import (
    EDGE_MUTATION,
    EDGE_REPAIR,
    EDGE_SEED,
    GenerationContext,
    Proposal,
)

SYSTEM_PROMPT = """You write GPU kernels in Triton for PyTorch operators.
Given a reference module `Model` (KernelBench format), write a Python module defining
`class ModelNew(nn.Module)` with the same constructor and forward signature, whose forward does
its work in `@triton.jit` kernels that it launches. Keep parameter names identical to Model's so
weights can be copied. Do not call the reference's torch operators in forward, do not catch
exceptions to fall back, do not use threads or extra streams.
Answer with exactly one ```python code block holding the complete module, and nothing else."""

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class LLMError(Exception):
    pass


NOT_CONFIGURED = (
    "the llm generator needs KERNELEVOLVE_LLM_URL (an OpenAI-compatible API): set it for the "
    "portal and its workers, or use the template generator"
)


def llm_configured(environ=None) -> bool:
    """Whether an endpoint is configured here (the portal checks before a campaign starts)."""
    return bool((os.environ if environ is None else environ).get("KERNELEVOLVE_LLM_URL"))


class LLMGenerator:
    """Proposes candidates by asking a chat model; see the module docstring."""

    name = "llm"

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        max_backoff_s: float = 30.0,
        temperature: float = 0.7,
    ) -> None:
        url = url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_backoff_s = max_backoff_s
        self.temperature = temperature
        self._stats = {
            "requests": 0,
            "answers": 0,
            "timeouts": 0,
            "rate_limited": 0,
            "http_errors": 0,
            "malformed": 0,
            "tokens_in": 0,
            "tokens_out": 0,
        }

    @classmethod
    def from_env(cls, **kwargs) -> LLMGenerator:
        url = os.environ.get("KERNELEVOLVE_LLM_URL")
        if not url:
            raise ValueError(NOT_CONFIGURED)
        return cls(
            url,
            os.environ.get("KERNELEVOLVE_LLM_MODEL", "default"),
            os.environ.get("KERNELEVOLVE_LLM_API_KEY") or None,
            **kwargs,
        )

    def describe(self, problem_source: str, train: bool = False) -> dict:
        return {"fits": True, "summary": f"chat model {self.model} at {self.url}"}

    def stats(self) -> dict:
        return dict(self._stats)

    # ---------------------------------------------------------------------------- prompting
    def messages(self, ctx: GenerationContext) -> list[dict]:
        parts = ["## Reference problem\n```python\n" + ctx.problem_source.strip() + "\n```"]
        if ctx.workload:
            cases = ctx.workload.get("cases", [])
            parts.append("## Workload (cases that matter, with weights)\n" + json.dumps(cases))
        parts.append(f"## Platform\n{ctx.platform}")
        if ctx.parents:
            parent = ctx.parents[0]
            parts.append(
                f"## Parent candidate {parent.get('id', '')}\n```python\n"
                + parent.get("source", "").strip()
                + "\n```"
            )
            fit = parent.get("fitness")
            if fit:
                parts.append(f"Parent fitness: {json.dumps(fit)}")
        if ctx.feedback:
            parts.append(
                f"## The parent failed the {ctx.feedback.get('gate')} gate\n"
                f"Reason: {ctx.feedback.get('reason')}\nEvidence:\n"
                f"```\n{str(ctx.feedback.get('evidence', ''))[-3000:]}\n```\n"
                "Fix this failure and keep what worked."
            )
        if ctx.knowledge:
            notes = "\n".join(
                f"- [{k.get('id')}] {k.get('title')}: {k.get('body')}" for k in ctx.knowledge
            )
            parts.append("## Knowledge (notes from earlier campaigns)\n" + notes)
        task = {
            EDGE_SEED: "Write a first fast, correct Triton implementation.",
            EDGE_REPAIR: "Write a corrected version of the parent.",
        }.get(ctx.mode, "Write a faster variant of the parent (change one idea at a time).")
        parts.append("## Task\n" + task)
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    # ------------------------------------------------------------------------------ calling
    def _post(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            self._stats["requests"] += 1
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as exc:
                if exc.code == 429:
                    self._stats["rate_limited"] += 1
                    if attempt >= self.max_retries:
                        raise LLMError("rate limited (HTTP 429)") from exc
                    wait = _retry_after(exc.headers.get("Retry-After"), attempt)
                    time.sleep(min(wait, self.max_backoff_s))
                    attempt += 1
                    continue
                self._stats["http_errors"] += 1
                raise LLMError(f"HTTP {exc.code}") from exc
            except TimeoutError as exc:
                self._stats["timeouts"] += 1
                raise LLMError("timeout") from exc
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    self._stats["timeouts"] += 1
                    raise LLMError("timeout") from exc
                self._stats["http_errors"] += 1
                raise LLMError(f"connection failed: {exc.reason}") from exc
            except json.JSONDecodeError as exc:
                self._stats["malformed"] += 1
                raise LLMError("response is not JSON") from exc

    def ask(self, ctx: GenerationContext) -> str:
        """One completion's code block; raises :class:`LLMError` (already counted)."""
        body = {
            "model": self.model,
            "messages": self.messages(ctx),
            "temperature": self.temperature,
        }
        answer = self._post(body)
        usage = answer.get("usage") or {}
        self._stats["tokens_in"] += int(usage.get("prompt_tokens") or 0)
        self._stats["tokens_out"] += int(usage.get("completion_tokens") or 0)
        try:
            content = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            self._stats["malformed"] += 1
            raise LLMError("no choices[0].message.content in the answer") from exc
        blocks = _BLOCK.findall(content)
        if len(blocks) != 1:
            self._stats["malformed"] += 1
            raise LLMError(f"expected exactly one code block, found {len(blocks)}")
        code = blocks[0].strip() + "\n"
        if "class ModelNew" not in code:
            self._stats["malformed"] += 1
            raise LLMError("the code block defines no ModelNew")
        self._stats["answers"] += 1
        return code

    def propose(self, ctx: GenerationContext, n: int) -> list[Proposal]:
        if ctx.feedback:
            edge = EDGE_REPAIR
        elif ctx.parents:
            edge = EDGE_MUTATION
        else:
            edge = EDGE_SEED
        # Crossover and alternatives are asked as mutations of the first parent.
        out = []
        for _ in range(n):
            try:
                code = self.ask(ctx)
            except LLMError as exc:
                self._stats["last_error"] = str(exc)
                continue
            ids = [k.get("id") for k in ctx.knowledge]
            out.append(Proposal(code, edge, {"model": self.model, "knowledge_ids": ids}, "llm"))
        return out


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return max(0.0, float(header)) if header is not None else 2.0**attempt
    except ValueError:
        return 2.0**attempt
