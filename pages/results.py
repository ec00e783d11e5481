"""Results: the paper's figures beside ours, and the learned control against activation steering.

Reads results.json written by `python -m steering experiments` for the checkpoint that is open (folder:
$STEERING_RESULTS, else assets/results for the shipped hybrid and CHECKPOINT/results for any other);
computes nothing itself.
"""

import os
from pathlib import Path

import streamlit as st

from lab_ui import models, widgets
from steering.evaluation.regimes_claim import regimes_map_paragraph
from steering.evaluation.results_table import DEFAULT_OUT, PAPER, load_results, results_folder, section_title
from steering.figures.results import accuracy_fluency_figure
from steering.lab import logic

checkpoint = models.checkpoint_dir()
folder = Path(os.environ.get("STEERING_RESULTS") or results_folder(checkpoint))
widgets.page_header(
    "Results: the paper's experiments on our model",
    "Each row: the paper's figure, ours measured on the checkpoint that is open, and how it was measured.",
    load_model=False,
    prompt=False,
)
widgets.sync_url("results")  # first: the page computes nothing from the state, and may stop below

try:
    results = load_results(folder)
except ValueError as err:
    st.error(str(err))
    st.stop()
if results is None:
    shipped = folder.resolve() == DEFAULT_OUT.resolve()
    command = "python -m steering experiments" + ("" if shipped else f" --checkpoint {checkpoint} --out {folder}")
    st.info(
        f"**No results yet for `{checkpoint}`:** `{folder / 'results.json'}` does not exist.\n\n"
        "Produce them (about 30 minutes on 2 CPU cores; `--quick` takes about a minute but its sizes are "
        "too small to mean much):\n\n"
        f"```\n{command}\n```\n\n"
        "Point this page at another folder with `STEERING_RESULTS=FOLDER streamlit run app.py`.",
        icon="🧪",
    )
    st.stop()

meta = results["meta"]
if meta.get("quick"):
    st.warning("These results come from a quick run (tiny sizes, for tests): read them as a smoke test only.")
baseline = f"discrete baseline `{meta['baseline']}`" if meta.get("baseline") else "studied alone (no baseline)"
st.caption(
    f"Hybrid `{meta['checkpoint']}`, {baseline}; the run took "
    f"{meta['total_seconds'] / 60:.1f} minutes on {meta['torch_threads']} thread(s)."
)
st.dataframe(
    [
        {"section": r["section"], "paper figure": r["paper"], "ours": r["ours"], "how measured": r["how"]}
        for r in results["table"]
    ],
    hide_index=True,
    width="stretch",
)

if "regimes_map" in results.get("solver_probing", {}):
    st.subheader("The paper's two regimes against the regimes map")
    st.markdown(
        logic.escape_markdown(regimes_map_paragraph(results["solver_probing"]["regimes_map"], PAPER["nfe_regimes"]))
        + " The map itself, per prompt: the Regimes page."
    )

for skipped in results.get("skipped", []):
    st.markdown(f"**Skipped: {section_title(skipped['section'])}.** {skipped['why']}.")
if "activation_steering" not in results:
    st.stop()

st.subheader("Learned control against activation steering")
act = results["activation_steering"]
widgets.plot(
    accuracy_fluency_figure([act["hybrid"], act["activation"]], font_size=widgets.font_size()), key="accuracy_fluency"
)
verdicts = [
    f"{'classifier' if judge == 'clf' else 'VADER'} judge: "
    f"{v['dominates'] + ' dominates' if v['dominates'] != 'neither' else 'neither dominates (the fronts cross)'}"
    for judge, v in act["pareto"].items()
]
st.markdown("**Pareto comparison** (lower perplexity and higher accuracy both better): " + "; ".join(verdicts) + ".")
st.caption(
    f"Each point is one steering magnitude: accuracy is the mean of the fraction judged positive at +m "
    f"and negative at -m over {act['prompts']} held-out prompts ({act['new_tokens']} sampled tokens each). "
    f"Grids, the same size and spacing for both: u {[round(x, 2) for x in act['u_grid']]}; "
    f"c {[round(x, 2) for x in act['c_grid']]} (steering vector norm {act['vector_norm']:.3f}: mean "
    f"residual after block 2, positive minus negative training reviews)."
)
