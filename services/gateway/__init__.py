"""The gateway: provider-shaped model APIs in front of token-in/token-out inference, capturing every call."""
