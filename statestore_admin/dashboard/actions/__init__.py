"""The actions: the dialogs that change state (a form or a confirmation, a page of its own without
JavaScript), each calling one service. ``dialogs`` holds what they share; ``forms`` their forms."""
