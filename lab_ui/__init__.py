"""Streamlit glue shared by the lab's pages (app.py and pages/). The logic (parsing, clamping, computing) lives in
steering/; these modules only bind it to Streamlit:

- models: per process: which checkpoint, the model loaded once, its PCA map and judges, the Steer page's
  work-ahead, and the analyses remembered for every session;
- widgets: per session: the state a link reproduces (read from the URL once, written back every run), the
  sidebar, sliders and page header, a talk's bar, and charts and downloads.
"""
