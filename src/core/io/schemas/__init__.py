"""JSON Schemas shipped with the package: task specs and results.json."""
