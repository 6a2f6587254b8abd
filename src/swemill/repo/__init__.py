"""swemill.repo"""
