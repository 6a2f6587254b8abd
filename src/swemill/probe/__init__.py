"""swemill.probe"""
