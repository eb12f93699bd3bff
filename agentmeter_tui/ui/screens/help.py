"""Provides :class:`HelpScreen`: every key of every screen, with the binding ids to remap them.

Built from the ``BINDINGS`` of the app and its screens plus the keymap in effect, so it can
never disagree with what the keys do.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help-close")]

    def __init__(self, sections: Sequence[tuple[str, Sequence[BindingType]]], keymap: dict[str, str]) -> None:
        super().__init__(classes="dialog")
        self.sections, self.keymap = sections, keymap

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box help-box"):
            yield Label("Keys", classes="dialog-title")
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield Static("Remap a key: [b]keymap[/] in ~/.config/agentmeter/ui.toml, e.g. "
                         "[b]keymap = { kill = \"ctrl+k\" }[/] · ctrl+p lists every action · esc closes",
                         classes="dialog-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # the description takes what the terminal leaves (a 116-column box at most): at 80 x 24
        # the box fits the screen, its rows wrap and the table scrolls
        width = min(116, self.app.size.width) - 4 - 8 - 2  # the box's border and padding, the cells', a scrollbar
        small = width < 90  # no room for the binding ids: they are for remapping, in ui.toml
        table.add_column("where", width=10)
        table.add_column("key", width=12 if small else 16)
        table.add_column("does", width=max(20, width - (22 if small else 44)))
        if not small:
            table.add_column("id", width=18)
        for section, bindings in self.sections:
            for entry in bindings:  # a BINDINGS entry may be a (key, action[, description]) tuple
                binding = entry if isinstance(entry, Binding) else Binding(*entry)
                if not binding.description:
                    continue
                keys = self.keymap.get(binding.id or "", binding.key)
                shown = ", ".join(self.app.get_key_display(Binding(k.strip(), "")) for k in keys.split(","))
                # height None: a long description wraps in its column instead of being cut
                cells = [Text(section, style="bold"), shown, Text(binding.tooltip or binding.description)]
                if not small:
                    cells.append(Text(binding.id or "", style="dim"))
                table.add_row(*cells, height=None)
        table.focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
