"""Pure plotly figure builders: plain data in, go.Figure out. Nothing here imports the model."""
