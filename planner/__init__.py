"""LLM inference capacity planner: pure analytical core (no streamlit, torch or vllm imports)."""

__version__ = "0.1.0"
