"""Host ops that run in Python at invoke: control flow, resource variables, random generators.
"""
