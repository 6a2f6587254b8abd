"""swemill's test doubles, kept out of the swemill wheel.

Each fake speaks the real wire format of what it stands for (HTTP model APIs, Bedrock batch
files in S3, S3 itself, Claude Code's session JSONL), so tests exercise swemill's real clients
and parsers. ``make setup`` installs this package into the development environment (it is a
member of the uv workspace and part of the ``dev`` dependency group); ``pip install swemill``
never sees it. Scripted policies, which users run, stay in :mod:`swemill.policies.scripted`.
"""
