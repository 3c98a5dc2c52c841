"""Environments written on the openreward SDK for the checker's own tests.

Each module is data-like: one ``Environment`` class with one defect (or none,
for the realistic clean ones), served with ``launch.start(AppTarget.parse("FILE.py:Class"))``
exactly as an environment author's own code would be. :data:`CASES` lists what
``orsbench check`` must say about each (see tests/test_user_envs.py).
"""
