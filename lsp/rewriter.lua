-- The rewriter language server for Neovim 0.11+, as a `vim.lsp.config` file: put this file in an
-- `lsp/` folder on your runtimepath (e.g. ~/.config/nvim/lsp/rewriter.lua, or add this
-- repository's root to 'runtimepath'), then
--
--   vim.lsp.enable('rewriter')
--   vim.lsp.config('rewriter', { init_options = { engine = { kind = 'embedded' } } }) -- optional
--
-- Code actions (vim.lsp.buf.code_action(), `gra`) offer the presets. In each attached buffer:
--   :Rewrite [instruction]   the range, or with no range the function/class at the cursor;
--                            with no instruction it prompts (vim.ui.input)
--   :RewriteFile [instruction], :RewriteCancel
-- With vim.g.rewriter_review = true (set it before vim.lsp.enable), rewrites become proposals shown
-- as a diff preview that you accept or reject (lsp/editors/nvim_review.lua, found beside this file
-- in the repository, lists the commands and mappings).
-- The rewrite's progress comes as LSP progress (the LspProgress event; :checkhealth vim.lsp
-- shows the log), and how it ended as a message.
-- Next-edit suggestions (textDocument/inlineCompletion) need Neovim 0.12: vim.lsp.inline_completion
-- shows them as ghost text while you type in insert mode, <Tab> accepts (vim.g.rewriter_next_edit_key
-- sets another key, false none), moving the cursor or <Esc> dismisses. vim.g.rewriter_next_edit =
-- false turns them off; on Neovim 0.11 a message says once that they are not available.

local function execute(client, bufnr, command, argument)
  client:request('workspace/executeCommand', { command = command, arguments = { argument } }, function(err)
    -- The server reports how a rewrite ends itself (window/showMessage); errors are bad requests.
    if err then
      vim.notify('rewriter: ' .. err.message, vim.log.levels.ERROR)
    end
  end, bufnr)
end

local function with_instruction(given, run)
  if given ~= nil and given ~= '' then
    return run(given)
  end
  vim.ui.input({ prompt = 'Rewrite: ' }, function(instruction)
    if instruction and vim.trim(instruction) ~= '' then
      run(instruction)
    end
  end)
end

local function add_commands(client, bufnr)
  local uri = vim.uri_from_bufnr(bufnr)
  vim.api.nvim_buf_create_user_command(bufnr, 'Rewrite', function(opts)
    local first, last = opts.line1 - 1, opts.line2
    if opts.range == 0 then -- an empty range: the server takes the function or class around it
      first = vim.api.nvim_win_get_cursor(0)[1] - 1
      last = first
    end
    with_instruction(opts.args, function(instruction)
      execute(client, bufnr, 'rewriter.rewrite', {
        uri = uri,
        range = { start = { line = first, character = 0 }, ['end'] = { line = last, character = 0 } },
        instruction = instruction,
      })
    end)
  end, { range = true, nargs = '*', desc = 'Rewrite the range (or the function at the cursor)' })
  vim.api.nvim_buf_create_user_command(bufnr, 'RewriteFile', function(opts)
    with_instruction(opts.args, function(instruction)
      execute(client, bufnr, 'rewriter.rewriteFile', { uri = uri, instruction = instruction })
    end)
  end, { nargs = '*', desc = 'Rewrite the whole buffer' })
  vim.api.nvim_buf_create_user_command(bufnr, 'RewriteCancel', function()
    execute(client, bufnr, 'rewriter.cancel', { uri = uri })
  end, { desc = 'Stop the rewrite running in this buffer' })
end

-- Neovim 0.12's inline completion for the server's next-edit suggestions, in this buffer.
local function enable_next_edit(client, bufnr)
  if vim.g.rewriter_next_edit == false or not client:supports_method('textDocument/inlineCompletion', bufnr) then
    return
  end
  local inline = vim.fn.has('nvim-0.12') == 1 and vim.lsp.inline_completion
  if not inline then
    return vim.notify_once('rewriter: next-edit suggestions need Neovim 0.12 (vim.lsp.inline_completion); '
      .. 'vim.g.rewriter_next_edit = false turns this message off', vim.log.levels.INFO)
  end
  inline.enable(true, { bufnr = bufnr })
  local key = vim.g.rewriter_next_edit_key
  if key == nil then key = '<Tab>' end
  if key then
    -- With no suggestion shown, the key does what it did.
    vim.keymap.set('i', key, function()
      if not inline.get() then return key end
    end, { buffer = bufnr, expr = true, replace_keycodes = true, desc = 'Accept the next-edit suggestion' })
  end
end

local review_module = debug.getinfo(1, 'S').source:sub(2):gsub('rewriter%.lua$', 'editors/nvim_review.lua')
local review = vim.g.rewriter_review and vim.fn.filereadable(review_module) == 1
if review then
  dofile(review_module).setup(function(bufnr, command, arguments, on_done)
    local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'rewriter' })[1]
    if not client then
      return vim.notify('rewriter: the language server is not attached to this buffer', vim.log.levels.WARN)
    end
    client:request('workspace/executeCommand', { command = command, arguments = arguments }, function(err, result)
      if err then vim.notify('rewriter: ' .. err.message, vim.log.levels.ERROR) end
      if on_done then on_done(err, result) end
    end, bufnr)
  end)
end

-- Declared where suggestions can be shown (0.12, not turned off), so that the server loads their
-- model as the first buffer opens rather than at the first suggestion.
local function capabilities()
  if vim.fn.has('nvim-0.12') ~= 1 or vim.g.rewriter_next_edit == false then
    return nil
  end
  return vim.tbl_deep_extend('force', vim.lsp.protocol.make_client_capabilities(),
    { textDocument = { inlineCompletion = { dynamicRegistration = false } } })
end

---@type vim.lsp.Config
return {
  cmd = { 'rewriter', 'lsp' },
  filetypes = { 'python', 'javascript', 'typescript', 'go', 'rust', 'java', 'c', 'cpp', 'lua' },
  root_markers = { 'pyproject.toml', 'package.json', 'go.mod', 'Cargo.toml', '.git' },
  -- Neovim applies versioned edits (checking the buffer version), so the rewrite can stream in.
  init_options = review and { streamEdits = 'always', review = true } or { streamEdits = 'always' },
  capabilities = capabilities(),
  on_attach = function(client, bufnr)
    add_commands(client, bufnr)
    enable_next_edit(client, bufnr)
  end,
}
