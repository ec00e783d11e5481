"""The steering lab: `streamlit run app.py`. This file routes the pages (each one a file in pages/) and holds the
landing page, which forwards to Steer."""

from __future__ import annotations

import streamlit as st

from lab_ui import widgets

st.set_page_config(
    page_title="Steering lab",
    page_icon=":material/explore:",
    layout="wide",
    initial_sidebar_state="collapsed" if widgets.state().presenter else "auto",
)


def home():
    """The root URL: app.py sends it on to Steer (or to the page that ?page= or a talk names) before it runs."""
    st.switch_page(PAGES["steer"])


# Every page has its own path, Steer too (/steer): the root is a hidden page that forwards to it, since
# Streamlit serves the default page at "/" only and would answer /steer with "Page not found". Each page is
# a file in pages/, named as its path: the server's first session runs Streamlit's old pages/ mode, which
# runs the file the path names without this one, and lab_ui.widgets.page_header runs this file in that run.
ROOT = st.Page(
    home, title="Steering lab", icon=":material/explore:", url_path="home", default=True, visibility="hidden"
)
PAGES = {
    name: st.Page(f"pages/{name}.py", title=title, icon=f":material/{icon}:", url_path=name)
    for name, title, icon in (
        ("steer", "Steer", "explore"),
        ("compare", "Compare", "compare"),
        ("trajectories", "Trajectories", "timeline"),
        ("solvers", "Solvers", "compare_arrows"),
        ("regimes", "Regimes", "speed"),
        ("lens", "Depth lens", "layers"),
        ("dynamics", "Dynamics", "blur_on"),
        ("training", "Training", "monitoring"),
        ("results", "Results", "fact_check"),
    )
}

page = st.navigation([ROOT, *PAGES.values()], position="top" if widgets.state().presenter else "sidebar")
widgets.apply_style()
target = widgets.start_page() or ("steer" if page is ROOT else None)
stepped = widgets.talk_bar()  # a talk's Previous / Next: that step's page, its state already set
if stepped is not None or (target is not None and (page is ROOT or PAGES[target].url_path != page.url_path)):
    st.switch_page(PAGES[stepped or target])
page.run()
