"""Where does loopcore plug into an agent framework? One module per framework.

Each module imports its framework on first use and needs that framework's extra
(``pip install 'loopcore[langchain]'`` and so on); ``import loopcore`` never
loads any of them.
"""
