"""pytest plugin (entry point ``pytest11``): fixtures for testing against ORS servers.

Placeholder filled in by the conformance work; registered here so the entry
point always resolves.
"""
