"""The server's community: its members, roles and who among them may do what."""
