"""A steerable continuous-depth transformer: model, training, analysis and the app's computations."""
