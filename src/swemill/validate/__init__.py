"""swemill.validate"""
