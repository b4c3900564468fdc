"""Planning: GN's data and a Config in, a GraphPlan (frozen records) out. Pure: no subprocess, socket or file
writes (import-linter forbids the modules; tests/unit/test_layout.py forbids the calls). May import gn/.
"""
