"""The suite's own collection settings: fixture projects are inputs to tests, not tests."""

# tests/fixtures/plugin_project/tests is the test suite of a user's project; tests/test_pytest_plugin.py
# runs it in its own pytest process.
collect_ignore = ["fixtures"]
