"""bench-train: fp32 and bf16 training steps of both architectures, timed in turns."""

import json

from steering.cli.main import main
from steering.training import bench as train_bench


def test_bench_train_reports_both_precisions_for_both_archs(monkeypatch, capsys):
    # a small layout, so the test times the real code path in seconds
    monkeypatch.setattr(train_bench, "FLAGSHIP", dict(d_model=64, n_heads=2, vocab_size=512, block_size=32))
    monkeypatch.setattr(
        train_bench, "FLAGSHIP_HYBRID", dict(train_bench.FLAGSHIP_HYBRID, field_heads=2, field_hidden=128)
    )
    monkeypatch.setattr(train_bench, "BATCH_ROWS", 4)
    assert main(["bench-train", "--json", "--steps", "1", "--rounds", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["tokens_per_s"]) == {"hybrid", "discrete"}
    for arch, rates in report["tokens_per_s"].items():
        assert set(rates) == {"fp32", "bf16"} and all(r > 0 for r in rates.values())
        assert report["bf16_speedup"][arch] == rates["bf16"] / rates["fp32"]
    assert report["batch"] == [4, 32] and report["rounds"] == 2
    text = train_bench.format_throughput(train_bench.measure_training_throughput(1, 1))
    assert "bf16 / fp32" in text and "hybrid" in text and "discrete" in text
