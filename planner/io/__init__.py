"""Readers of the outside world: the catalog (the only reader of models/, hardware/ and profiles),
bounded file opening, JSONL records, request traces and Hugging Face config import."""
