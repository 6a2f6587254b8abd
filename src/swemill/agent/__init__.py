"""swemill.agent"""
