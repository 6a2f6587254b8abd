"""swemill.testing"""
