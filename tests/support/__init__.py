"""What the test levels share: paths of the fixtures, the session's expensive artefacts
(``fixtures``, a pytest plugin), the loopback model mirror, the float comparisons
(``numerics``), the standard layer checks, special files, the console script and the tiny
training set-up. Test modules import from here, never from each other or from conftest."""
