"""Training: the options (config), the two stages and resume (train), torchrun (distributed), checkpoints as
plain files (checkpoint), and training throughput (bench, `bench-train`). Built on data, judges and the model."""
