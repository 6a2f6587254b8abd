"""swemill.aws"""
