"""Jinja2 templates for the ninja files gn-thinlto writes (installed as gn_thinlto.templates)."""
