"""Conversations -> token ids with a loss mask, for any of three kinds of tokenizer.

- `ByteTokenizer`: built in, for demos and tests. UTF-8 bytes plus a few special tokens.
- `tokenizers.Tokenizer`: turns are rendered as `<|role|>\\ncontent\\n` and encoded one turn
  at a time.
- a transformers tokenizer (anything with `apply_chat_template`): its own chat template is
  rendered one prefix longer each turn, and the ids each assistant turn adds are its span.

`chat_tokenizer(tok)` wraps any of them. The wrapper gives `encode_chat(messages) -> (ids,
mask)`, an `eos_id`, and an `identity()` that hashes the vocabulary and template. The
identity goes into the cache fingerprint, so a different tokenizer never reuses packs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

ROLES = ("system", "user", "assistant", "tool")


def normalize_messages(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """`messages`, `prompt`/`response`, or ShareGPT `conversations` -> [{"role", "content"}]."""
    if "messages" in record:
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in record["messages"]]
    elif "prompt" in record and "response" in record:
        messages = [{"role": "user", "content": str(record["prompt"])},
                    {"role": "assistant", "content": str(record["response"])}]
    elif "conversations" in record:
        names = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
        messages = [{"role": names.get(str(m.get("from", "")).lower(), str(m.get("from"))),
                     "content": str(m["value"])} for m in record["conversations"]]
    else:
        raise ValueError(f"a chat record needs 'messages', 'prompt'/'response' or 'conversations'; got keys "
                         f"{sorted(record)}")
    for m in messages:
        if m["role"] not in ROLES:
            raise ValueError(f"unknown chat role {m['role']!r}; roles are {ROLES}")
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError("a conversation needs at least one assistant message")
    return messages


class ByteTokenizer:
    """UTF-8 bytes (ids 0-255) plus special tokens; vocabulary size 264."""

    PAD, BOS, EOS, END = 256, 257, 258, 259
    ROLE_IDS = {"system": 260, "user": 261, "assistant": 262, "tool": 263}
    vocab_size = 264

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class ChatTokenizer:
    """The common interface the packing pipeline uses."""

    eos_id: int

    def encode_chat(self, messages: Sequence[Mapping[str, str]],
                    loss_on: str = "assistant") -> tuple[list[int], list[bool]]:
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _finish(ids: list[int], mask: list[bool], eos_id: int, loss_on: str, last_role: str
                ) -> tuple[list[int], list[bool]]:
        ids.append(eos_id)  # the model learns to stop after the answer
        mask.append(loss_on == "all" or last_role == "assistant")
        if loss_on == "all":
            mask = [True] * len(ids)
        return ids, mask


class _ByteChat(ChatTokenizer):
    def __init__(self, tokenizer: ByteTokenizer):
        self.tokenizer = tokenizer
        self.eos_id = ByteTokenizer.EOS

    def encode_chat(self, messages: Sequence[Mapping[str, str]],
                    loss_on: str = "assistant") -> tuple[list[int], list[bool]]:
        ids: list[int] = [ByteTokenizer.BOS]
        mask: list[bool] = [False]
        for m in messages:
            body = [*self.tokenizer.encode(m["content"]), ByteTokenizer.END]
            ids += [ByteTokenizer.ROLE_IDS[m["role"]], *body]
            mask += [False] + [m["role"] == "assistant"] * len(body)
        return self._finish(ids, mask, self.eos_id, loss_on, messages[-1]["role"])

    def identity(self) -> dict[str, Any]:
        return {"kind": "byte", "vocab_size": ByteTokenizer.vocab_size, "version": 1}


class _TokenizersChat(ChatTokenizer):
    """A `tokenizers.Tokenizer`: one `<|role|>\\ncontent\\n` segment per turn."""

    def __init__(self, tokenizer: Any, eos_id: int | None):
        self.tokenizer = tokenizer
        if eos_id is None:
            for name in ("</s>", "<|endoftext|>", "<eos>", "<|eos|>", "[SEP]"):
                eos_id = tokenizer.token_to_id(name)
                if eos_id is not None:
                    break
        if eos_id is None:
            raise ValueError("the tokenizer has no known end-of-sequence token; pass eos_id= to PackingConfig")
        self.eos_id = int(eos_id)

    def encode_chat(self, messages: Sequence[Mapping[str, str]],
                    loss_on: str = "assistant") -> tuple[list[int], list[bool]]:
        ids: list[int] = []
        mask: list[bool] = []
        for m in messages:
            header = self.tokenizer.encode(f"<|{m['role']}|>\n", add_special_tokens=False).ids
            body = self.tokenizer.encode(f"{m['content']}\n", add_special_tokens=False).ids
            ids += header + body
            mask += [False] * len(header) + [m["role"] == "assistant"] * len(body)
        return self._finish(ids, mask, self.eos_id, loss_on, messages[-1]["role"])

    def identity(self) -> dict[str, Any]:
        return {"kind": "tokenizers", "eos_id": self.eos_id,
                "sha256": hashlib.sha256(self.tokenizer.to_str().encode()).hexdigest()}


class _TemplateChat(ChatTokenizer):
    """A transformers tokenizer: its chat template, rendered one prefix longer per turn."""

    def __init__(self, tokenizer: Any, eos_id: int | None):
        self.tokenizer = tokenizer
        self.eos_id = int(eos_id if eos_id is not None else tokenizer.eos_token_id)

    def _render(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        out = self.tokenizer.apply_chat_template(list(messages), tokenize=True)
        return list(out["input_ids"] if isinstance(out, Mapping) else out)

    def encode_chat(self, messages: Sequence[Mapping[str, str]],
                    loss_on: str = "assistant") -> tuple[list[int], list[bool]]:
        ids: list[int] = []
        mask: list[bool] = []
        for k, m in enumerate(messages):
            full = self._render(messages[:k + 1])
            if full[:len(ids)] != ids:
                raise ValueError("the chat template does not render conversations prefix by prefix; "
                                 "cannot find the assistant spans")
            added = full[len(ids):]
            ids += added
            mask += [m["role"] == "assistant"] * len(added)
        return self._finish(ids, mask, self.eos_id, loss_on, messages[-1]["role"])

    def identity(self) -> dict[str, Any]:
        vocab = self.tokenizer.get_vocab() if hasattr(self.tokenizer, "get_vocab") else {}
        text = json.dumps([sorted(vocab.items()), getattr(self.tokenizer, "chat_template", None),
                           type(self.tokenizer).__name__], default=str)
        return {"kind": "chat_template", "eos_id": self.eos_id, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def chat_tokenizer(tokenizer: Any = None, eos_id: int | None = None) -> ChatTokenizer:
    """Wrap a ByteTokenizer (also for None), a tokenizers.Tokenizer or a transformers tokenizer."""
    if tokenizer is None or isinstance(tokenizer, ByteTokenizer):
        return _ByteChat(tokenizer or ByteTokenizer())
    if isinstance(tokenizer, ChatTokenizer):
        return tokenizer
    if hasattr(tokenizer, "apply_chat_template"):
        return _TemplateChat(tokenizer, eos_id)
    if hasattr(tokenizer, "to_str") and hasattr(tokenizer, "token_to_id"):
        return _TokenizersChat(tokenizer, eos_id)
    raise TypeError(f"unsupported tokenizer {type(tokenizer).__name__}: pass a tokenizers.Tokenizer, a "
                    "transformers tokenizer, or stable_datasets.sft.ByteTokenizer()")


def encode_conversations(conversations: Sequence[Sequence[Mapping[str, str]]], tokenizer: ChatTokenizer,
                         loss_on: str = "assistant") -> list[tuple[np.ndarray, np.ndarray]]:
    if loss_on not in ("assistant", "all"):
        raise ValueError(f"loss_on must be 'assistant' or 'all', got {loss_on!r}")
    out = []
    for messages in conversations:
        ids, mask = tokenizer.encode_chat(messages, loss_on)
        out.append((np.asarray(ids, dtype=np.int32), np.asarray(mask, dtype=np.int8)))
    return out
