"""Judges of generated text: the shipped TF-IDF + logistic-regression sentiment and style classifiers and VADER
(judge), and the judge per axis trained on one's own file (axis_judges). Built on data only."""
