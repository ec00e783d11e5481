"""The lab behind the Streamlit pages, without Streamlit: URL state, input cleaning and labels (logic), the work
ahead of the user (prefetch), the talk kit (talk, talk_scripts), and the figures as slides (figure_export). Built
on everything but the command line."""
