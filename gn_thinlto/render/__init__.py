"""Rendering: a GraphPlan into ninja text (Jinja2 templates), manifests as JSON text. Text in, text out.

May import plan/, gn/ and steps/ (the step scripts' paths and the ninja syntax they share).
"""
