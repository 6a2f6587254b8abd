"""swemill.sandbox"""
