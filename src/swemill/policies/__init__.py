"""swemill.policies"""
