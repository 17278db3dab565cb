"""What the Streamlit dashboard (app.py) shows, one module per view, without Streamlit itself: the sidebar's
inputs and their state (:mod:`.inputs`, :mod:`.scenario`, :mod:`.presets`), the views' tables and texts
(:mod:`.views`, :mod:`.cost_view`, :mod:`.deploy_view`, :mod:`.headline`, :mod:`.compare`, :mod:`.view_text`)
and the figures (:mod:`.charts`, :mod:`.charts_cost`)."""
