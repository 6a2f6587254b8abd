"""swemill.replay"""
