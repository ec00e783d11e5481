"""Byte-level BPE (HF `tokenizers`): any text encodes, nothing is ever out of vocabulary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

BOS = "<|endoftext|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_tokenizer(path: str | Path) -> Tokenizer:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # the tokenizers library raises a bare Exception on bad JSON
        raise ValueError(f"tokenizer file {path} is corrupt: {err}") from None


def bos_id(tok: Tokenizer) -> int:
    return tok.token_to_id(BOS)


def encode(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def decode(tok: Tokenizer, ids: list[int]) -> str:
    return tok.decode([i for i in ids if i != bos_id(tok)])
