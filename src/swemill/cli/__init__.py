"""swemill.cli"""
