"""The warm job server: rule scripts' jobs run as forks of one process that imported the
heavy libraries once (:mod:`.client`, what a rule script's process does; :mod:`.server`,
the server). Ground floor: standard library and third-party imports only, no stage."""
