"""Training: loss, grad norms and α of the hybrid against the discrete baseline, from the checkpoints' logs."""

import streamlit as st

from lab_ui import models, widgets
from steering.figures.training import global_steps, training_curves_figure
from steering.lab import logic

widgets.page_header(
    "Training: hybrid vs discrete",
    "Stage 1 trains both models as language models; stage 2 (shaded) "
    "trains only the hybrid's ODE block (and the blocks after it) to follow the control u. Raw values "
    "faint, smoothed bold.",
    load_model=False,
    prompt=False,
)
widgets.sync_url("training")  # first: the page computes nothing from the state, and may stop below

logs = models.training_logs()
missing = [name for name, records in logs.items() if not records]
for name in missing:
    path = models.checkpoint_dir() if name == "hybrid" else models.baseline_dir()
    st.warning(
        f"No training log for the {name} model at `{path}` (train_log.jsonl). Train it with "
        f"`python -m steering train --arch {name} --out {path}`."
    )
logs = {name: records for name, records in logs.items() if records}
if not logs:
    st.stop()

smooth = st.slider("Smoothing (EMA span, steps)", 1, 100, 15, key="w_smooth")
widgets.plot(training_curves_figure(logs, smooth=smooth, font_size=widgets.font_size()), key="training_curves")

st.subheader("Stability")
st.caption(
    "Grad norms are before clipping (mean ± standard deviation over the stage). A step counts as "
    "exploding when its grad norm exceeds 10× the median of the previous 200, as vanishing when the "
    "middle block's grad norm is below 1e-7 (the trainer's own flags)."
)
st.dataframe(logic.stability_rows(logs), hide_index=True, width="stretch")

for name, records in logs.items():
    steps = global_steps(records).tolist()
    columns = {"global_step": steps}
    for field in ("stage", "step", "loss", "grad_norm", "ode_grad_norm", "alpha", "lr", "tokens_per_s"):
        columns[field] = [r.get(field) for r in records]
    columns["val_loss"] = [r.get("val_loss") for r in records]
    widgets.download_csv(f"Download the {name} log (CSV)", columns, f"training_{name}.csv", key=f"csv_{name}")
