"""What the test modules share that is not a fixture: API helpers, factories, the test tools,
the local servers they run. Fixtures live in the conftest files (the root one for those every
area uses, an area's own for the rest); no test module imports another test module."""
