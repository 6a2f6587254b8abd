"""swemill.store"""
